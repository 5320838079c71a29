"""One module per schema version; 0001-0007 are the hand-rolled migrations they replace."""
