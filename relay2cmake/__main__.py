from relay2cmake.cli import main

main()
