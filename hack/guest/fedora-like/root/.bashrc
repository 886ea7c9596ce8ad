# The prompt is /etc/bash.bashrc's (Fedora's); add your own settings below.
