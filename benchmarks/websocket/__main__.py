from benchmarks.websocket.run import main

main()
