import typer

from demo.batch_demo import main

typer.run(main)
