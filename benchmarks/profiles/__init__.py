"""Where the time goes: the event loop's callbacks and CPU, a text's path through the modules."""
