"""Attention over the paged KV cache: a PyTorch reference that runs anywhere (FlashInfer on CUDA to come)."""
