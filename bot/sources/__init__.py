"""The second sources behind one contract (base.py): Read the Docs, Codecov, Azure Pipelines."""
