"""The user-side command lines: `market` (market.py; batches in batches.py), the dispute and jury commands of
`arbitration` (arbitration.py), and the options and error handling every command line shares (support.py)."""
