from fleetctl.cli import main

raise SystemExit(main())
