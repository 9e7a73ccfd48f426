"""`python -m acl_fa ...` = the `acl-fa` command."""
from .cli import main

main(prog_name="acl-fa")
