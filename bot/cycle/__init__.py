"""One pass, in one direction per chunk of pull requests: gather -> judge -> plan -> publish.

model.py (what the stages hand each other), gather.py (the only stage that reads), judge.py and
plan.py (pure), publish.py (the only stage that writes comments), comments.py (looking at a pull
request's comments for the bot's own), run.py (drives the stages; imported by bot.app alone).
"""
