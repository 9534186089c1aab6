"""Command-line entry of ``electra_ablate.scaleout.node.pretrain_throughput``: the measuring
code lives in the package, so that ``ablate kit`` carries it in the project's wheel."""

from electra_ablate.scaleout.node.pretrain_throughput import main

if __name__ == "__main__":
    main()
