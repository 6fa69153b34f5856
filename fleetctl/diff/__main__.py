from fleetctl.diff.command import main

raise SystemExit(main())
