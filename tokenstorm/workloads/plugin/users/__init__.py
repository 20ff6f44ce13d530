"""The simulated users: a user class per traffic model and the one ``send`` path."""
