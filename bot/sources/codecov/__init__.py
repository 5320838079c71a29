"""Codecov: its commit record settles its statuses and check runs GitHub shows pending."""
