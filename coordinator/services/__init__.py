"""What the API and the workers do, apart from HTTP and Celery: plain functions over a session."""
