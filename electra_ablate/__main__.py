from electra_ablate.cli import main

main()
