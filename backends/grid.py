"""2-D positions (vision towers): being written for issue 56."""
