from demo.lifecycle import main

main()
