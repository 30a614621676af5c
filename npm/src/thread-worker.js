// One CPU thread of `rlx`'s threaded core (threads.js starts it).
import * as glue from "../dist/mt/rlx_web.js";
import { serveThread } from "./thread-serve.js";

serveThread(glue);
