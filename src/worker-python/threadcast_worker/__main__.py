from threadcast_worker.cli import main

main()
