"""What a correct endpoint would do, computed locally: tokenizers, chat templates, profiles."""
