"""getWeather: the input JSON on stdin, the answer (a JSON string) on stdout."""
import json
import sys

question = json.load(sys.stdin).get("question", "")
words = [w.strip("?!.,;:") for w in question.split()]
city = next((w for w in reversed(words) if w), "your city")
json.dump(f"In {city} it is 18 °C and partly cloudy, with a light westerly wind.", sys.stdout)
