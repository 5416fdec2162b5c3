"""The operator's command line, `coordinator` (app.py: deploy, plan, simulate; services.py: serve, worker,
db)."""
