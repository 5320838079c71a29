"""Azure Pipelines: its build record settles its check runs and statuses GitHub shows running."""
