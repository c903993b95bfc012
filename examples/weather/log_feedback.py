"""logFeedback: publishes the feedback as userFeedbackReceived (an event line), answers {}."""
import json
import sys

feedback = json.load(sys.stdin)
print(f"feedback: {feedback.get('rating')} stars", file=sys.stderr)
print(json.dumps({"event": "userFeedbackReceived", "data": feedback}), flush=True)
print("{}")
