"""Model shards: a contiguous slice of a Hugging Face decoder checkpoint, computed by our own layer code."""
