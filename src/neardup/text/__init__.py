"""The text pipeline: normalization and tokenizers (see DESIGN §3)."""
