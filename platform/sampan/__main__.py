import sys

from sampan.cli import main

sys.exit(main())
