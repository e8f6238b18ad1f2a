from gangsched.cli.main import main

main()
