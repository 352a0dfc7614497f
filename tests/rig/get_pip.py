"""Stand-in for pip's get-pip.py, which ansible-test downloads from a host our
CI cannot reach. Installs the pip bundled with Python, then the pip that
ansible-test asked for, from the package index.

ansible-test hides pip's configuration files, so the system CA bundle is named
here; the newer pip then verifies through the system trust store by itself."""
import ensurepip
import ssl
import subprocess
import sys

ensurepip.bootstrap()
args = [a for a in sys.argv[1:] if a not in ('--no-setuptools', '--no-wheel')]
cafile = ssl.get_default_verify_paths().cafile
cert = ['--cert', cafile] if cafile else []
subprocess.check_call([sys.executable, '-m', 'pip', 'install'] + cert + args)
