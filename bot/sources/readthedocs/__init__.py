"""Read the Docs as a second source: its client and its evidence for a docs check."""
