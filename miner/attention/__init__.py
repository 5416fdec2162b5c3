"""Attention over the paged KV cache, one interface: FlashInfer on CUDA, a PyTorch reference anywhere."""
