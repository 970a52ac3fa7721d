"""Hello-world apps (3 routes each) for surge and every peer."""
