"""`make demo`: the market's main job, end to end, on a local devnet."""
