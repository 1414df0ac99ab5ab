"""The management API (routes, errors, serialization) behind the api Lambda and local mode."""
