"""The processes behind ``flask solidq work``: workers, dispatchers, the scheduler, and the
supervisor that starts and watches them."""
