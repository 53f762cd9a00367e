"""ubipy: a peer-to-peer distributed web crawler."""

__version__ = "0.1.0"
PROJECT_URL = "https://github.com/ubipy/ubipy"
