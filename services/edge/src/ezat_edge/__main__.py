from ezat_common.runtime import run_service

from .app import main

run_service(main)
