"""Local stand-ins for the servers the platform talks to, so that tests never leave the machine."""
