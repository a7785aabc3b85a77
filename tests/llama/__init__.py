"""llama.cpp's llama-server as a real third-party endpoint: model files and processes for tests."""
