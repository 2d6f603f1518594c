"""The tools the client answers: the router (with the two the conductor itself calls), the IDE tools
simulated over a folder, how they are declared, and results cut into frames."""
