"""vLLM (CPU build) as a real third-party endpoint: its virtual environment, model and process.

vLLM is a vendor under test, so it lives in a virtual environment of its own under the test
cache: its pins for torch, transformers and openai never change what the verifier runs with.
"""
