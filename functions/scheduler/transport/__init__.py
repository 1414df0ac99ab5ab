"""What crosses a process boundary: the API's client, SigV4 (signing and verifying), plain HTTP
to API Gateway events (local mode), the fan-out's Lambda invokes, CloudFormation's custom
resource answers."""
