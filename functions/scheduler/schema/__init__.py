"""The job JSON as pydantic models: the API's one schema of a job and of every target."""
