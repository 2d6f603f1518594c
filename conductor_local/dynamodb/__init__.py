"""The local DynamoDB: moto's server on loopback and the conductor's tables."""
