"""``python -m ezat_billing``: run the billing service until SIGTERM/SIGINT."""

from .app import main

main()
