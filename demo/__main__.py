from demo.batch_demo import main

main()
