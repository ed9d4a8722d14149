"""How many streams, calls and server connections one machine carries in real time."""
