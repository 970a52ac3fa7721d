from benchmarks.middleware.run import main

main()
