import os

# The quickstart starts a scripted stand-in model only when the test suite runs it.
os.environ["TUTOR_QUICKSTART_DEMO"] = "1"
