"""Forward passes the steps share: model loading, response logprobs (padded/packed), critic values."""
